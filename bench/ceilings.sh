#!/usr/bin/env bash
# Benchmark (not a test): this host's ceilings in release mode, the quick and
# the full version, tables and JSON kept in target/bench/. As root both runs
# also time the raw-frame send paths on a temporary veth pair (removed
# afterwards). Quote the figures only from a
# quiet host: the `noisy` warning says when repeats disagree.
#
# usage: bench/ceilings.sh [REPEATS]   (default 7; the full run takes a few minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
REPEATS=${1:-7}
LR=target/release/linerate
OUT=target/bench
cargo build --release -q -p linerate
mkdir -p "$OUT"
"$LR" ceilings --quick | tee "$OUT/ceilings-quick.txt"
"$LR" ceilings --repeats "$REPEATS" --json > "$OUT/ceilings.json"
"$LR" ceilings --repeats "$REPEATS" --wide | tee "$OUT/ceilings.txt"
