#!/usr/bin/env bash
# bench/demo.sh — how long `linerate demo` takes (release build), a few
# rounds of each: without privileges (as nobody through setpriv when run as
# root, else as the caller; the tour's bedless part only) and, as root, the
# whole tour (the bedless part, then seed001 and seed000 with --short on
# testbeds it brings up and removes). Wall-clock time from bash's
# EPOCHREALTIME; nothing is saved in the history (--no-save). The targets:
# unprivileged within about 15 s, as root within about 90 s; quote the
# figures only from a quiet host.
#
# usage: bench/demo.sh [ROUNDS]   (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${1:-3}
linerate_bin

# Runs the demo ROUNDS times with the words given before it; prints each
# round's seconds and exit code, then the median.
rounds() {
    local label=$1; shift
    local times=()
    for r in $(seq "$ROUNDS"); do
        local t0=$EPOCHREALTIME rc=0
        "$@" >/dev/null 2>&1 || rc=$?
        local s
        s=$(python3 -c "print(f'{$EPOCHREALTIME - $t0:.1f}')")
        echo "$label: round $r: ${s} s (exit $rc)"
        times+=("$s")
    done
    python3 -c "import statistics,sys; print(f'$label: median {statistics.median(map(float, sys.argv[1:])):.1f} s of $ROUNDS')" "${times[@]}"
}

if [ "$(id -u)" = 0 ]; then
    if setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN" --version >/dev/null 2>&1; then
        rounds "unprivileged (nobody)" setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN" --no-save demo
    else
        rounds "unprivileged part (--no-bed)" "$BIN" --no-save demo --no-bed
    fi
    rounds "as root" "$BIN" --no-save demo
else
    rounds "unprivileged" "$BIN" --no-save demo
    echo "as root: not measured (run bench/demo.sh as root)"
fi
