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
#      every 0.2 s during each test, and what the resident set was made of
#      when it was largest (/proc/PID/smaps: the program's code and data,
#      libraries, heap, threads' stacks with malloc arenas, main stack).
#      Measured under load (2 shared CPUs), kB, linerate / iperf3: before
#      the grouped code (crates/linerate/symbol-order.txt) and the deferred
#      flag definitions, client 9956 / server 9788 forward (2.31x / 2.34x),
#      10144 / 9088 reverse (2.39x / 2.18x); after, see docs/METHODOLOGY.md
#      ("Memory"), which also says what remains and why.
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
# A field (kB) of /proc/PID/status, or 0.
status_kb() { sed -n "s/^$2:[[:space:]]*\([0-9]*\) kB/\1/p" "/proc/$1/status" 2>/dev/null || echo 0; }

# What the resident set of PID is made of, kB, from /proc/PID/smaps:
# the program's own file (code r-x; read-only data, relocated data),
# shared libraries and the loader (file-backed), the main heap, thread
# stacks and malloc arenas (other anonymous mappings) and the main stack.
# Fails when the process ended while it was read.
breakdown() {
    local exe
    exe=$(basename "$(tr '\0' '\n' <"/proc/$1/cmdline" | head -n 1)") || return 1
    awk -v exe="$exe" '
        /^[0-9a-f]+-[0-9a-f]+ / {
            path = $6; n = split(path, parts, "/"); base = parts[n]
            if (path != "" && base == exe) name = ($2 ~ /x/) ? "own code" : "own data"
            else if (path ~ /^\//) name = "libraries"
            else if (path == "[heap]") name = "heap"
            else if (path == "[stack]") name = "main stack"
            else if (path == "") name = "threads+arenas"
            else name = "other"
            next
        }
        /^Rss:/ { kb[name] += $2 }
        END {
            if (length(kb) == 0) exit 1
            for (k in kb) if (kb[k] > 0) printf "%d %s\n", kb[k], k
        }' "/proc/$1/smaps" | sort -rn |
        awk '{v = $1; $1 = ""; printf "%s%s %d", sep, substr($0, 2), v; sep = "  "} END {print ""}'
}

# One look at side $1 (client or server), its process id in $TMPD/pid-$1:
# the largest RssAnon so far in $TMPD/anon-$1, and what the resident set
# was made of when it was largest in $TMPD/parts-$1.
look() { # side
    local p a r
    p=$(cat "$TMPD/pid-$1" 2>/dev/null)
    [ -n "$p" ] || return 0
    a=$(status_kb "$p" RssAnon)
    [ "${a:-0}" -gt "$(cat "$TMPD/anon-$1")" ] && echo "$a" >"$TMPD/anon-$1"
    r=$(status_kb "$p" VmRSS)
    if [ "${r:-0}" -gt "$(cat "$TMPD/rss-$1")" ] && breakdown "$p" >"$TMPD/part"; then
        echo "$r" >"$TMPD/rss-$1"
        mv "$TMPD/part" "$TMPD/parts-$1"
    fi
    return 0
}

# One test: server under /usr/bin/time in b, client under /usr/bin/time in a,
# looked at every 0.2 s while the client runs (`look`). Each is started by
# a shell that writes its own process id and then becomes the program (its
# peak, below a megabyte, is under either program's).
# Prints "client_kB server_kB client_anon server_anon".
one() { # tool dir
    local tool=$1 dir=$2 srv cli side
    if [ "$tool" = linerate ]; then
        srv=("$BIN" server --bind $IP_B --port 5300 --once --no-iperf3 --no-save)
        cli=("$BIN" throughput $IP_B --port 5300 --time "$T" --streams 4 --no-save --json)
        [ "$dir" = reverse ] && cli+=(--reverse)
    else
        srv=(iperf3 -s -1 -B $IP_B -p 5201)
        cli=(iperf3 -c $IP_B -p 5201 -t "$T" -P 4)
        [ "$dir" = reverse ] && cli+=(-R)
    fi
    for side in client server; do
        echo 0 >"$TMPD/anon-$side"
        echo 0 >"$TMPD/rss-$side"
        : >"$TMPD/parts-$side"
        rm -f "$TMPD/pid-$side"
    done
    inB timeout $((T + 30)) /usr/bin/time -v -o "$TMPD/srv" sh -c 'echo $$ >"$0"; exec "$@"' "$TMPD/pid-server" "${srv[@]}" >/dev/null 2>&1 &
    local spid=$!
    sleep 0.5
    inA timeout $((T + 20)) /usr/bin/time -v -o "$TMPD/cli" sh -c 'echo $$ >"$0"; exec "$@"' "$TMPD/pid-client" "${cli[@]}" >/dev/null 2>&1 &
    local cpid=$!
    while kill -0 "$cpid" 2>/dev/null; do
        look client
        look server
        sleep 0.2
    done
    wait "$cpid" || true
    wait "$spid" || true
    echo "$(maxrss "$TMPD/cli") $(maxrss "$TMPD/srv") $(cat "$TMPD/anon-client") $(cat "$TMPD/anon-server")"
}

echo "memory over veth ($A ↔ $B), ${T} s per test, $(date -u +%FT%TZ); load: $(cut -d' ' -f1-3 /proc/loadavg)"
# The release link groups the functions of crates/linerate/symbol-order.txt
# (bench/symbol-order.sh); names the binary no longer defines (a code
# change renames a few, a toolchain or dependency update most) are skipped,
# and its code is then less compact: regenerate the list when many are.
if command -v nm >/dev/null; then
    order=$HERE/crates/linerate/symbol-order.txt
    nm "$BIN" | awk '$2 ~ /^[tTwW]$/ {print $3}' | sort -u >"$TMPD/defined"
    grep -v '^#' "$order" | sort -u >"$TMPD/listed"
    echo "symbol order: $(comm -12 "$TMPD/listed" "$TMPD/defined" | wc -l) of $(wc -l <"$TMPD/listed") listed functions defined in $BIN"
fi
echo
echo "1. peak RSS, 4 TCP streams (kB; anon = largest RssAnon seen)"
printf '%-8s %-9s %10s %10s %12s %12s\n' dir tool client server client-anon server-anon
declare -A R
for dir in forward reverse; do
    for tool in iperf3 linerate; do
        R[$dir,$tool]=$(one "$tool" "$dir")
        # shellcheck disable=SC2086
        printf '%-8s %-9s %10s %10s %12s %12s\n' "$dir" "$tool" ${R[$dir,$tool]}
        echo "         client at its largest (kB): $(cat "$TMPD/parts-client")"
        echo "         server at its largest (kB): $(cat "$TMPD/parts-server")"
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
